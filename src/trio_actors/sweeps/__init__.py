"""The ``trio-actors`` command line: ``contracts`` now, the batch-size sweep later."""
