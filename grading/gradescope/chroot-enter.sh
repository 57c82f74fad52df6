#!/usr/bin/env bash
# Enter a root filesystem for `python -m lucyshop.lab.grade.stockimage` (make autograder-proof).
#
#   unshare --pid --fork --kill-child --mount --propagation private -- \
#       chroot-enter.sh ROOT [HOST_DIR:DIR_IN_ROOT ...] -- [NAME=VALUE ...] COMMAND ...
#
# Run as the first process of a new PID and mount namespace, so nothing is left behind: the
# mounts made here (ROOT on itself, the namespace's own proc, the host's /dev, the caches) belong
# to that mount namespace and go with it, and when this script ends the kernel ends every
# process still in the PID namespace. It stays the namespace's first process (it does not exec)
# so that orphans are reaped, as Gradescope's harness does for run_autograder. COMMAND runs
# with a clean environment: the host's pip and apt settings do not leak into the image.
set -euo pipefail
root=$1
shift
mount --bind "$root" "$root"  # the image's / a mount point, as in a container (bwrap needs it)
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
while [[ $# -gt 0 && $1 != -- ]]; do
    host=${1%%:*}
    inside=${1#*:}
    mkdir -p "$host" "$root$inside"
    mount --bind "$host" "$root$inside"
    shift
done
shift
status=0
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" || status=$?
exit "$status"
