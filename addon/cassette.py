"""The mitmdump entry: `mitmdump -s addon/cassette.py`.

mitmproxy puts this file's folder on sys.path while it loads the script, so
the `cassette_proxy` package beside it is what runs, installed or not; the
package installs this file beside itself, so `cassette run` loads the same code.
The launcher's sockets are listened on before the addon runs and accept only after (proxy/listening/handover.py).
"""

from cassette_proxy.proxy.addon import CassetteAddon
from cassette_proxy.proxy.listening.handover import HANDED, ListenOnHandedSockets, ServeHandedSockets

addons = [ListenOnHandedSockets(HANDED), CassetteAddon(), ServeHandedSockets(HANDED)]
