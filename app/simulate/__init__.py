"""`loadaware simulate`: what loadaware would do for a cluster, offline (docs/simulate.md)."""
