top base.folded
