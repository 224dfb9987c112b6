"""Work done in separate processes (big requests, big replays), and the cache of replies ready to send."""
