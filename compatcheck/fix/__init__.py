"""`compatcheck fix`: the catalog's rewrites made on the model file by codemods, each run through the
ladder again on a copy, and offered only where that run proves them (candidates → proof → the file)."""
