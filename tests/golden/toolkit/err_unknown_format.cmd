convert -t xml base.folded
