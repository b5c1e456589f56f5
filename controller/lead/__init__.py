"""The lead: the election and its fence, the leader's model of ZooKeeper state, the reconciler and its fenced, byte-bounded writes."""
