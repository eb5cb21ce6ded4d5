package io.tickwheel.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** Relay forwards loopback TCP connections to a target; cut() resets every connection through it. */
final class Relay implements AutoCloseable {
  private final ServerSocket server;
  private final String host;
  private final int port;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  final String addr;
  /** While held, nothing is forwarded (bytes wait in the relay): a server that does not answer. */
  volatile boolean held;
  /** While holding replies, bytes from the server wait in the relay (requests still go through): replies lost in a cut. */
  volatile boolean holdReplies;
  /** While refusing, new connections are closed at once: a server that is down. */
  volatile boolean refusing;

  Relay(String target) throws IOException {
    int i = target.lastIndexOf(':');
    host = target.substring(0, i);
    port = Integer.parseInt(target.substring(i + 1));
    server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    addr = "127.0.0.1:" + server.getLocalPort();
    Thread t = new Thread(this::accept, "relay");
    t.setDaemon(true);
    t.start();
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        Socket down = server.accept();
        if (refusing) {
          close(down);
          continue;
        }
        Socket up = new Socket(host, port);
        sockets.add(down);
        sockets.add(up);
        pipe(down, up, false);
        pipe(up, down, true);
      } catch (IOException e) {
        return;
      }
    }
  }

  private void pipe(Socket from, Socket to, boolean replies) {
    Thread t = new Thread(() -> {
      byte[] b = new byte[64 * 1024];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(b)) >= 0) {
          while (held || replies && holdReplies) Thread.sleep(5);
          out.write(b, 0, n);
        }
      } catch (IOException | InterruptedException ignored) {
        // cut
      } finally {
        close(from);
        close(to);
      }
    }, "relay-pipe");
    t.setDaemon(true);
    t.start();
  }

  private static void close(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // closing
    }
  }

  /** cut resets every connection through the relay; returns how many sockets it closed. */
  int cut() {
    int n = sockets.size();
    for (Socket s : sockets) {
      try {
        s.setSoLinger(true, 0);
      } catch (IOException ignored) {
        // already closed
      }
      close(s);
    }
    sockets.clear();
    return n;
  }

  @Override
  public void close() throws IOException {
    cut();
    server.close();
  }
}
