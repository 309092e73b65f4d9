install -d -m 0750 -o edge-controller -g edge-controller /var/lib/edge-controller
chown edge-controller:edge-controller /etc/edge-controller /etc/edge-controller/controller.yaml
chmod 0750 /etc/edge-controller
chmod 0640 /etc/edge-controller/controller.yaml
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
if [ "$1" -eq 1 ]; then systemctl enable edge-controller.service >/dev/null 2>&1 || true; fi
exit 0
