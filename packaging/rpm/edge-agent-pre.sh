getent group edge-agent >/dev/null || groupadd --system edge-agent
getent passwd edge-agent >/dev/null || useradd --system --gid edge-agent --home-dir /var/lib/edge-agent --no-create-home --shell /sbin/nologin --comment "edge-agent service" edge-agent
exit 0
