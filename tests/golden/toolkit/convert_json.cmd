convert -t json base.folded
