# free_port: prints a TCP port of 127.0.0.1 that nothing listens on now, as the operating system
# picks it (bind to port 0), so that launches that run at the same time do not collide on a
# random one; a random port where no Python is at hand.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $((20000 + RANDOM % 20000))
}
