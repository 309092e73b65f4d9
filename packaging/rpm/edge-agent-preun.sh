if [ "$1" -eq 0 ]; then
  systemctl disable --now edge-agent.service >/dev/null 2>&1 || true
fi
exit 0
