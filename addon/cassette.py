"""The mitmdump entry: `mitmdump -s addon/cassette.py`.

mitmproxy puts this file's folder on sys.path while it loads the script, so
the `cassette_proxy` package beside it is what runs, installed or not; the
package installs this file beside itself, so `cassette run` loads the same code.
HandOver comes after the addon: the launcher's sockets accept only once the addon runs (proxy/handover.py).
"""

from cassette_proxy.proxy.addon import Cassette
from cassette_proxy.proxy.handover import HANDED, HandOver

addons = [Cassette(), HandOver(HANDED)]
