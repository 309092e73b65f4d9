install -d -m 0750 -o edge-agent -g edge-agent /var/lib/edge-agent
chown edge-agent:edge-agent /etc/edge-agent /etc/edge-agent/agent.yaml
chmod 0750 /etc/edge-agent
chmod 0640 /etc/edge-agent/agent.yaml
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
if [ "$1" -eq 1 ]; then systemctl enable edge-agent.service >/dev/null 2>&1 || true; fi
exit 0
