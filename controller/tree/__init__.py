"""The distribution tree's control: switched targets, reachability probes, the tree view and `ferry tree`
(its pure core is ``common.core.tree``)."""
