"""MirrorMaker 2 to Ferry: its properties files converted (``ferry import-mm2``) and its wire formats read."""
