"""The `tfxflow` command: a thin parser per subcommand over the runners, reports and tools; flags are generated
from the settings classes."""
