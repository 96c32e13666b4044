diff --format top base.folded new.folded
