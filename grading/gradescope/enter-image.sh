#!/usr/bin/env bash
# Enter a root filesystem for `python -m lucyshop.proof.gradescope.stockimage` (make autograder-proof).
#
#   unshare --pid --fork --kill-child --mount --propagation private -- \
#       enter-image.sh ROOT [HOST_DIR:DIR_IN_ROOT ...] -- [NAME=VALUE ...] COMMAND ...
#
# Run as the first process of a new PID and mount namespace, so nothing is left behind: the
# mounts made here (ROOT on itself, the namespace's own proc, the host's /dev with a /dev/shm of
# its own, the caches) belong
# to that mount namespace and go with it, and when this script ends the kernel ends every
# process still in the PID namespace. The namespace's first process is a shell that waits for
# COMMAND, so that orphans are reaped, as Gradescope's harness does for run_autograder. COMMAND
# runs with a clean environment: the host's pip and apt settings do not leak into the image.
set -euo pipefail
root=$1
shift
mount --bind "$root" "$root"  # the image's / a mount point of its own, as in a container
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
# A /dev/shm of its own, as a container has: the host's holds other processes' shared memory
# (libfaketime leaves root's faketime_sem_PID behind, which an unprivileged PID-alike then
# cannot open).
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
while [[ $# -gt 0 && $1 != -- ]]; do
    host=${1%%:*}
    inside=${1#*:}
    mkdir -p "$host" "$root$inside"
    mount --bind "$host" "$root$inside"
    shift
done
shift
# pivot_root, not chroot: the image becomes the namespace's whole filesystem (the host's is
# unmounted), and, as in a container, its processes are not "chrooted" (the kernel refuses a
# chrooted process a user namespace, which bubblewrap asks for).
cd "$root"
mkdir -p .host
pivot_root . .host
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
exec /usr/bin/env -i PATH="$path" /bin/bash -c '
    umount -l /.host && rmdir /.host
    /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb PATH="$0" "$@" &
    wait $!
' "$path" "$@"
