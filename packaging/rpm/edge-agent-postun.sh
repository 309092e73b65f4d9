if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
# Upgrade: restarted only if it was running.
if [ "$1" -ge 1 ]; then systemctl try-restart edge-agent.service >/dev/null 2>&1 || true; fi
exit 0
