top -n 3 --cum base.folded
