#!/bin/bash
# tplab's mock Vast cloud: an instance's container start (runtype ssh / ssh_direct).
# Vast's init puts the instance's SSH keys in ~/.ssh/authorized_keys (here the mock wrote them),
# starts sshd (here: asks the mock to, through $TPLAB_MOCK_SSHD_FLAG), then runs the create's
# onstart script (here $TPLAB_VAST_ONSTART, Vast's /root/onstart.sh) in the background, with
# its output in ~/onstart.log, and keeps the container alive.
umask 077
mkdir -p "$HOME/.ssh"
: > "$TPLAB_MOCK_SSHD_FLAG"
echo "start.sh: sshd started"
if [ -s "$TPLAB_VAST_ONSTART" ]; then
    bash "$TPLAB_VAST_ONSTART" >> "$HOME/onstart.log" 2>&1 &
fi
exec sleep infinity
