"""ZooKeeper: Ferry's one layout of paths and its kazoo clients, the one reader of its state, `ferry zk`."""
