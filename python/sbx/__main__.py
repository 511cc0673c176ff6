"""python3 -m sbx rollout ...: the main job (sbx.rollout)."""
import sys

from . import rollout


def main(argv):
    if len(argv) < 1 or argv[0] != "rollout":
        sys.stderr.write("usage: python3 -m sbx rollout --tasks DIR [--episodes N] "
                         "[--concurrency K] [--runner ns|podman|docker] [--out DIR] [--json]\n")
        return 2
    return rollout.main(argv[1:])


sys.exit(main(sys.argv[1:]))
