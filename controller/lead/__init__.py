"""The lead: the election and its fence, the leader state (the leader's copy of ZooKeeper's), the reconciler
and its fenced, byte-bounded writes."""
