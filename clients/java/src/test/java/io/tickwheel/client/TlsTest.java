package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** TLS (SSLEngine over NIO) against the real server with mTLS: certificates made by `tickwheel certs`. */
class TlsTest {
  static Path dir;
  static TestServer srv;

  @BeforeAll
  static void start() throws Exception {
    dir = TestServer.tempDir("tw-java-tls");
    Process p = new ProcessBuilder(TestServer.binary().toString(), "certs", "-dir", dir.resolve("c").toString(),
        "-hosts", "localhost,127.0.0.1").redirectErrorStream(true).start();
    p.getInputStream().readAllBytes();
    assertEquals(0, p.waitFor());
    dir = dir.resolve("c");
    srv = TestServer.start("-tls-cert", dir.resolve("server.pem").toString(), "-tls-key",
        dir.resolve("server.key").toString(), "-tls-client-ca", dir.resolve("ca.pem").toString());
  }

  @AfterAll
  static void stop() throws Exception {
    srv.close();
    TestServer.rmrf(dir.getParent());
  }

  private ClientOptions opts(TlsConfig t) {
    return srv.admin().tls(t).reconnect(false).connectTimeout(Duration.ofSeconds(5));
  }

  @Test
  void addAndFireOverMutualTls() throws Exception {
    Events ev = new Events();
    TlsConfig t = TlsConfig.mutual(dir.resolve("ca.pem"), dir.resolve("client.pem"), dir.resolve("client.key"));
    try (TickwheelClient c = TickwheelClient.connect(opts(t).listener(ev))) {
      c.bind(3).join();
      long due = c.add(3, 1, 2, AddOptions.defaults().data("over tls")).join();
      assertEquals(new FastForwardResult(due, 1), c.fastForward(2).join());
      Event.Fire f = ev.fires(1).get(0);
      assertEquals(due, f.tick());
      assertArrayEquals("over tls".getBytes(StandardCharsets.UTF_8), f.data());
      // Many pipelined requests through the TLS layer at once.
      java.util.List<java.util.concurrent.CompletableFuture<Long>> fs = new java.util.ArrayList<>();
      for (long tid = 10; tid < 1010; tid++) fs.add(c.add(3, tid, 100, AddOptions.defaults().data(new byte[512])));
      fs.forEach(java.util.concurrent.CompletableFuture::join);
      assertEquals(1000, c.cancelAll(3).join());
    }
  }

  @Test
  void refusalsAreClearErrors() throws Exception {
    // A CA that did not sign the server's certificate.
    TlsConfig wrongCa = TlsConfig.mutual(dir.resolve("client.pem"), dir.resolve("client.pem"), dir.resolve("client.key"));
    TickwheelException e = assertThrows(TickwheelException.class, () -> TickwheelClient.connect(opts(wrongCa)));
    assertTrue(e.getMessage().contains("certif") || e.getMessage().contains("PKIX"), e.getMessage());
    // No client certificate: the server (mTLS) refuses it.
    TlsConfig noCert = TlsConfig.trusting(dir.resolve("ca.pem"));
    assertThrows(TickwheelException.class, () -> TickwheelClient.connect(opts(noCert)).ping().join());
    // Plaintext to the TLS port: the server says so.
    TickwheelException plain = assertThrows(TickwheelException.class, () -> TickwheelClient.connect(opts(null)));
    assertTrue(plain.getMessage().contains("speaks TLS"), plain.getMessage());
  }
}
