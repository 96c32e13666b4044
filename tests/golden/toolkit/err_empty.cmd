top empty.folded
