convert -t folded --prune 0.12 base.folded
