gate base.folded new.folded
