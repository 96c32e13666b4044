convert -t folded base.folded new.folded
