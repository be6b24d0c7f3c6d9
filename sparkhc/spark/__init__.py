"""The Spark layer: the only part of sparkhc that imports pyspark."""
