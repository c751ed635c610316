"""The command line every loadaware process shares: its flags (``flags``: converters,
environment variables, exit codes), its log lines (``logs``: text or JSON) and the
progress bar of the long commands (``progress``).

Standard library only, so that ``loadaware --help`` stays quick. Each module lists its
names once, in its ``__all__``.
"""

from app.commandline.flags import *  # noqa: F403
from app.commandline.logs import *  # noqa: F403
from app.commandline.names import *  # noqa: F403
from app.commandline.progress import *  # noqa: F403
