"""The fuzz targets' seed corpora writer (make_seeds)."""
