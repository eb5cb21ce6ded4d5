package io.tickwheel.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.msgpack.value.Value;

/**
 * Connection is one TCP connection to a server, driven by its own I/O thread over a
 * non-blocking {@link SocketChannel} and a {@link Selector}. Callers on any thread queue
 * whole request frames with {@link #send}; the I/O thread writes every frame queued so far
 * in one gathering write (so many pipelined requests share a write), reads frames, and
 * matches replies to requests in order (the protocol answers in request order). Pushes go
 * to the push handler on the I/O thread, which must not block. Replies complete their
 * futures on the I/O thread too. Owned by its {@link TickwheelClient}; {@link Transport}
 * is where TLS sits.
 */
final class Connection {
  /** A request waiting for its reply: its op name and its future. */
  record Pending(String op, CompletableFuture<java.util.List<Value>> future) {}

  private final String addr;
  private final Transport transport;
  private final Selector selector;
  private final SelectionKey key;
  private final Consumer<Protocol.Message> onPush;
  private final Consumer<Throwable> onClose;
  private final ConcurrentLinkedQueue<byte[]> outQueue = new ConcurrentLinkedQueue<>();
  private final ArrayDeque<Pending> pending = new ArrayDeque<>(); // guarded by itself
  private final AtomicBoolean wakeupSent = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final Thread thread;
  private final int maxFrame;
  private volatile boolean readPaused;
  private volatile long lastWrite = System.nanoTime();
  private ByteBuffer in = ByteBuffer.allocate(64 * 1024); // owned by the I/O thread
  private ByteBuffer out = ByteBuffer.allocate(64 * 1024); // owned by the I/O thread, flip()ed while it holds bytes
  private boolean outHolds;

  private Connection(String addr, SocketChannel ch, Transport transport, int maxFrame,
      Consumer<Protocol.Message> onPush, Consumer<Throwable> onClose) throws IOException {
    this.addr = addr;
    this.transport = transport;
    this.maxFrame = maxFrame;
    this.onPush = onPush;
    this.onClose = onClose;
    this.selector = Selector.open();
    ch.configureBlocking(false);
    this.key = ch.register(selector, SelectionKey.OP_READ);
    this.thread = new Thread(this::loop, "tickwheel-io " + addr);
    this.thread.setDaemon(true);
  }

  /**
   * open connects to addr ("host:port") within connectTimeoutMs (a blocking connect on the
   * caller's thread), sets the transport up (TLS: the handshake) and starts the I/O thread.
   */
  static Connection open(String addr, int connectTimeoutMs, TlsConfig tls, int maxFrame,
      Consumer<Protocol.Message> onPush, Consumer<Throwable> onClose) throws IOException {
    int i = addr.lastIndexOf(':');
    if (i <= 0) throw new IOException("tickwheel: address " + addr + ": want host:port");
    String host = addr.substring(0, i);
    if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
    int port = Integer.parseInt(addr.substring(i + 1));
    SocketChannel ch = SocketChannel.open();
    try {
      ch.socket().connect(new InetSocketAddress(host, port), connectTimeoutMs);
      ch.socket().setTcpNoDelay(true);
      Transport t = tls == null ? new Transport.Plain(ch) : Transport.Tls.handshake(ch, tls, host, port, connectTimeoutMs);
      Connection c = new Connection(addr, ch, t, maxFrame, onPush, onClose);
      c.thread.start();
      return c;
    } catch (IOException | RuntimeException e) {
      ch.close();
      throw e;
    }
  }

  String address() {
    return addr;
  }

  long lastWriteNanos() {
    return lastWrite;
  }

  boolean isClosed() {
    return closed.get();
  }

  /**
   * send queues a whole frame and its reply's future; the I/O thread writes it. Order of
   * send calls is the order on the wire and of the replies. On a closed connection the
   * future fails with {@link TickwheelException.Disconnected}.
   */
  void send(byte[] frame, Pending p) {
    synchronized (pending) {
      if (closed.get()) {
        p.future().completeExceptionally(new TickwheelException.Disconnected(p.op(), null));
        return;
      }
      pending.add(p);
      outQueue.add(frame);
    }
    if (wakeupSent.compareAndSet(false, true)) selector.wakeup();
  }

  /** pauseReading stops reading the socket (backpressure: the server then holds events back). */
  void pauseReading() {
    readPaused = true;
    selector.wakeup();
  }

  /** resumeReading reads the socket again. */
  void resumeReading() {
    if (!readPaused) return;
    readPaused = false;
    selector.wakeup();
  }

  /** close closes the connection; pending requests fail with cause. Idempotent. */
  void close(Throwable cause) {
    if (!closed.compareAndSet(false, true)) return;
    try {
      key.channel().close();
    } catch (IOException ignored) {
      // closing: nothing to do
    }
    selector.wakeup();
    java.util.List<Pending> failed;
    synchronized (pending) {
      failed = new java.util.ArrayList<>(pending);
      pending.clear();
    }
    for (Pending p : failed) p.future().completeExceptionally(new TickwheelException.Disconnected(p.op(), cause));
    onClose.accept(cause);
  }

  private void loop() {
    Throwable cause = null;
    try {
      while (!closed.get()) {
        boolean wantWrite = outHolds || !outQueue.isEmpty() || transport.wantsWrite();
        int ops = (readPaused ? 0 : SelectionKey.OP_READ) | (wantWrite ? SelectionKey.OP_WRITE : 0);
        if (key.interestOps() != ops) key.interestOps(ops);
        if (!(wantWrite && !outHolds) && !(transport.hasBufferedInput() && !readPaused)) selector.select(1000);
        else selector.selectNow();
        wakeupSent.set(false);
        if (closed.get()) break;
        if (!readPaused && (key.isReadable() || transport.hasBufferedInput())) readFrames();
        flush();
      }
    } catch (Throwable t) {
      cause = t;
    } finally {
      try {
        selector.close();
      } catch (IOException ignored) {
        // closing
      }
      close(cause == null ? new IOException("tickwheel: connection closed") : cause);
    }
  }

  /** flush moves queued frames into the out buffer and writes as much as the socket takes. */
  private void flush() throws IOException {
    for (;;) {
      if (!outHolds) {
        out.clear();
        byte[] f;
        while ((f = outQueue.peek()) != null) {
          if (f.length > out.remaining()) {
            if (out.position() > 0) break;
            out = ByteBuffer.allocate(Math.max(f.length, out.capacity()));
          }
          out.put(outQueue.poll());
        }
        out.flip();
        outHolds = out.hasRemaining();
        if (!outHolds) {
          transport.write(null); // a TLS transport may still hold bytes to write
          return;
        }
      }
      transport.write(out);
      lastWrite = System.nanoTime();
      if (out.hasRemaining() || transport.wantsWrite()) return; // the socket is full: OP_WRITE
      outHolds = false;
      if (outQueue.isEmpty()) return;
    }
  }

  private void readFrames() throws IOException {
    for (int rounds = 0; rounds < 16 && !readPaused; rounds++) {
      if (!in.hasRemaining()) {
        ByteBuffer b = ByteBuffer.allocate(in.capacity() * 2);
        in.flip();
        b.put(in);
        in = b;
      }
      int n = transport.read(in);
      if (n < 0) throw new IOException("tickwheel: the server closed the connection");
      if (n == 0) return;
      in.flip();
      while (in.remaining() >= Protocol.HEADER) {
        int len = in.getInt(in.position());
        if (len <= 0 || (maxFrame > 0 && len > maxFrame)) {
          throw new IOException("tickwheel: frame of " + Integer.toUnsignedString(len) + " bytes from the server");
        }
        if (in.remaining() < Protocol.HEADER + len) {
          if (in.capacity() < Protocol.HEADER + len) {
            ByteBuffer b = ByteBuffer.allocate(Protocol.HEADER + len);
            b.put(in);
            in = b;
            in.flip();
          }
          break;
        }
        int at = in.position() + Protocol.HEADER;
        Protocol.Message m = Protocol.decode(in.array(), at, len);
        in.position(at + len);
        dispatch(m);
        if (closed.get()) return;
      }
      in.compact();
    }
  }

  private void dispatch(Protocol.Message m) throws IOException {
    if (m instanceof Protocol.Ok ok) {
      Pending p = nextPending(ok.id());
      p.future().complete(ok.result());
    } else if (m instanceof Protocol.Err e) {
      if (e.id() == 0 && peekPending() == null) {
        throw TickwheelException.of("connection", e.code(), e.message(), e.leader());
      }
      Pending p = nextPending(e.id());
      TickwheelException ex = TickwheelException.of(p.op(), e.code(), e.message(), e.leader());
      p.future().completeExceptionally(ex);
      if (e.code() == 1 || e.code() == 12 || e.code() == TickwheelException.NOT_LEADER) {
        throw ex; // the server closes after these
      }
    } else if (m instanceof Protocol.Push) {
      onPush.accept(m);
    }
  }

  private Pending peekPending() {
    synchronized (pending) {
      return pending.peek();
    }
  }

  private Pending nextPending(long id) throws IOException {
    synchronized (pending) {
      Pending p = pending.poll();
      if (p == null) throw new IOException("tickwheel: a reply (id " + Long.toUnsignedString(id) + ") to no request");
      return p;
    }
  }
}
