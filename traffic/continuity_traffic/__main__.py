import sys

from continuity_traffic.cli import main

sys.exit(main())
