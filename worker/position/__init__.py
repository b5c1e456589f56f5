"""Where a partition's copy starts and goes on: an explicit offset at assignment (committed, a route's
``start``, MirrorMaker 2's progress), the destination read back to resume exactly, and what to do
when the position leaves the source log."""
