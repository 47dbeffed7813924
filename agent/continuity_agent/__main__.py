"""``python -m continuity_agent --config FILE``."""

import sys

from continuity_agent.service import main

if __name__ == "__main__":
    sys.exit(main())
