package io.tickwheel.client;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;

/**
 * Transport is the byte stream under the frames: plain TCP, or TLS through an
 * {@link SSLEngine} over the same non-blocking channel (the JDK's TLS; no dependency).
 * Used by the connection's I/O thread only, after setup.
 */
interface Transport {
  /** read moves plaintext into dst; returns bytes read, 0 when none now, -1 at the end. */
  int read(ByteBuffer dst) throws IOException;

  /** write writes as much of src (null: none) as the socket takes now. */
  void write(ByteBuffer src) throws IOException;

  /** wantsWrite: bytes the transport holds (TLS records) wait for the socket. */
  boolean wantsWrite();

  /** hasBufferedInput: plaintext or records are held that need no socket read. */
  boolean hasBufferedInput();

  /** Plain is TCP as it is. */
  final class Plain implements Transport {
    private final SocketChannel ch;

    Plain(SocketChannel ch) {
      this.ch = ch;
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
      return ch.read(dst);
    }

    @Override
    public void write(ByteBuffer src) throws IOException {
      if (src != null) ch.write(src);
    }

    @Override
    public boolean wantsWrite() {
      return false;
    }

    @Override
    public boolean hasBufferedInput() {
      return false;
    }
  }

  /** Tls runs an SSLEngine: records are read into netIn and unwrapped into appIn, wrapped into netOut. */
  final class Tls implements Transport {
    private final SocketChannel ch;
    private final SSLEngine engine;
    private ByteBuffer netIn;
    private ByteBuffer appIn; // flip()ed: holds plaintext not yet read
    private ByteBuffer netOut; // flip()ed: holds records not yet written
    private boolean eof;

    private Tls(SocketChannel ch, SSLEngine engine) {
      this.ch = ch;
      this.engine = engine;
      int net = engine.getSession().getPacketBufferSize();
      int app = engine.getSession().getApplicationBufferSize();
      netIn = ByteBuffer.allocate(net);
      appIn = ByteBuffer.allocate(app).flip();
      netOut = ByteBuffer.allocate(net).flip();
    }

    /**
     * handshake runs the TLS handshake on a still blocking channel, within timeoutMs,
     * checking the server's certificate against the configured trust and its name
     * against host (HTTPS endpoint identification).
     */
    static Tls handshake(SocketChannel ch, TlsConfig cfg, String host, int port, int timeoutMs) throws IOException {
      SSLEngine e = cfg.context().createSSLEngine(cfg.serverName() != null ? cfg.serverName() : host, port);
      e.setUseClientMode(true);
      SSLParameters p = e.getSSLParameters();
      if (cfg.verifyHostname()) p.setEndpointIdentificationAlgorithm("HTTPS");
      e.setSSLParameters(p);
      Tls t = new Tls(ch, e);
      ch.socket().setSoTimeout(timeoutMs);
      try {
        t.runHandshake(System.nanoTime() + timeoutMs * 1_000_000L);
      } catch (SocketTimeoutException ex) {
        throw new SSLException("tickwheel: TLS handshake timed out", ex);
      }
      return t;
    }

    private void runHandshake(long deadline) throws IOException {
      engine.beginHandshake();
      java.io.InputStream blockingIn = ch.socket().getInputStream(); // honours SO_TIMEOUT
      for (;;) {
        if (System.nanoTime() > deadline) throw new SSLException("tickwheel: TLS handshake timed out");
        SSLEngineResult.HandshakeStatus hs = engine.getHandshakeStatus();
        switch (hs) {
          case NEED_WRAP -> {
            wrap(ByteBuffer.allocate(0));
            while (netOut.hasRemaining()) ch.write(netOut);
          }
          case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
            if (unwrap() == 0 && engine.getHandshakeStatus() == hs) {
              byte[] b = new byte[netIn.remaining()];
              int n = blockingIn.read(b);
              if (n < 0) throw new SSLException("tickwheel: the server closed the connection during the TLS handshake");
              netIn.put(b, 0, n);
            }
          }
          case NEED_TASK -> runTasks();
          default -> {
            return; // FINISHED or NOT_HANDSHAKING
          }
        }
      }
    }

    private void runTasks() {
      Runnable r;
      while ((r = engine.getDelegatedTask()) != null) r.run();
    }

    /** wrap wraps src into netOut (which must be empty of unwritten records first). */
    private void wrap(ByteBuffer src) throws IOException {
      ByteBuffer o = netOut.compact();
      for (;;) {
        SSLEngineResult r = engine.wrap(src, o);
        if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
          ByteBuffer b = ByteBuffer.allocate(o.capacity() * 2);
          o.flip();
          b.put(o);
          o = b;
          continue;
        }
        if (r.getStatus() == SSLEngineResult.Status.CLOSED) throw new SSLException("tickwheel: TLS closed");
        if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) runTasks();
        break;
      }
      netOut = o.flip();
    }

    /** unwrap unwraps what netIn holds into appIn; returns plaintext bytes made. */
    private int unwrap() throws IOException {
      int made = 0;
      netIn.flip();
      try {
        for (;;) {
          ByteBuffer a = appIn.compact();
          SSLEngineResult r;
          try {
            r = engine.unwrap(netIn, a);
          } finally {
            appIn = a.flip();
          }
          made += r.bytesProduced();
          switch (r.getStatus()) {
            case BUFFER_OVERFLOW -> {
              ByteBuffer b = ByteBuffer.allocate(appIn.capacity() * 2);
              b.put(appIn);
              appIn = b.flip();
              continue;
            }
            case BUFFER_UNDERFLOW -> {
              if (netIn.limit() == netIn.capacity() && netIn.position() == 0) {
                ByteBuffer b = ByteBuffer.allocate(netIn.capacity() * 2);
                b.put(netIn);
                b.flip();
                netIn = b;
              }
              return made;
            }
            case CLOSED -> {
              eof = true;
              return made;
            }
            default -> { }
          }
          if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) runTasks();
          if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP) return made;
          if (!netIn.hasRemaining() || (r.bytesConsumed() == 0 && r.bytesProduced() == 0)) return made;
        }
      } finally {
        netIn.compact();
      }
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
      if (!appIn.hasRemaining() && !eof) {
        int n = ch.read(netIn);
        unwrap();
        if (n < 0 && !appIn.hasRemaining()) eof = true;
      }
      if (!appIn.hasRemaining()) return eof ? -1 : 0;
      int k = Math.min(dst.remaining(), appIn.remaining());
      ByteBuffer s = appIn.duplicate();
      s.limit(s.position() + k);
      dst.put(s);
      appIn.position(appIn.position() + k);
      return k;
    }

    @Override
    public void write(ByteBuffer src) throws IOException {
      if (netOut.hasRemaining()) {
        ch.write(netOut);
        if (netOut.hasRemaining()) return;
      }
      if (engine.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP) {
        wrap(ByteBuffer.allocate(0));
        ch.write(netOut);
        if (netOut.hasRemaining()) return;
      }
      while (src != null && src.hasRemaining()) {
        wrap(src);
        ch.write(netOut);
        if (netOut.hasRemaining()) return;
      }
    }

    @Override
    public boolean wantsWrite() {
      return netOut.hasRemaining();
    }

    @Override
    public boolean hasBufferedInput() {
      return appIn.hasRemaining() || netIn.position() > 0;
    }
  }
}
