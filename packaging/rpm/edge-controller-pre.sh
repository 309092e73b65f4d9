getent group edge-controller >/dev/null || groupadd --system edge-controller
getent passwd edge-controller >/dev/null || useradd --system --gid edge-controller --home-dir /var/lib/edge-controller --no-create-home --shell /sbin/nologin --comment "edge-controller service" edge-controller
exit 0
