#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image. Written for any
# Debian or Ubuntu image: Gradescope's default (Ubuntu 22.04, whose python3 is 3.10) and a bare
# Debian root filesystem with no Python at all (make autograder-proof runs it in one).
#
# The kit needs Python 3.11 or newer (tomllib, datetime.UTC): where the image's python3 is
# older, Python 3.11 comes from the distribution itself (Ubuntu 22.04: universe, jammy-updates;
# Debian 12: main); no third-party archive. Only what grading needs is installed: the kit's
# `grade` extra (pytest, pytest-timeout, and for exercise 7 a PostgreSQL server in a wheel,
# psycopg and libfaketime). No model and no compiler: the measured exercises are graded on the kit's scripted
# stand-in (lucyshop.lab.model.scripted).
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
KIT="$ROOT/source/kit"
EXTRAS="grade"
export DEBIAN_FRONTEND=noninteractive PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

new_enough() {  # $1 is a Python 3.11 or newer
    command -v "$1" >/dev/null && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))'
}

# bubblewrap: the kit moves student code into a bubblewrap sandbox.
packages=(ca-certificates bubblewrap)
if new_enough python3; then
    packages+=(python3-venv)  # Debian and Ubuntu keep ensurepip out of python3 itself
else
    packages+=(python3.11 python3.11-venv)
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${packages[@]}"

PYTHON=python3
new_enough python3 || PYTHON=python3.11
if ! new_enough "$PYTHON"; then
    echo "setup.sh: no Python 3.11 or newer after installing ${packages[*]}" >&2
    exit 1
fi
"$PYTHON" -m venv "$KIT/.venv"
"$KIT/.venv/bin/python" -m pip install -q --upgrade pip
"$KIT/.venv/bin/python" -m pip install -q -e "$KIT[$EXTRAS]"
# Where bubblewrap cannot start (a container without user namespaces) student code runs as an
# unprivileged user, which the sandbox allows only once the kit's protected parts (the
# reference, the tests, ...: lucyshop.lab.sandbox.jail.PROTECTED) are closed to other users.
"$KIT/.venv/bin/python" -c '
from lucyshop.lab.sandbox.jail import PROTECTED, ROOT
for part in (ROOT / name for name in PROTECTED):
    if part.exists():
        part.chmod(part.stat().st_mode & ~0o007)
'
echo "setup.sh: $("$KIT/.venv/bin/python" --version), extras [$EXTRAS], $(bwrap --version)"
