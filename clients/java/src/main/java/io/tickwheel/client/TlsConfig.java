package io.tickwheel.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * TlsConfig says how the client speaks TLS to a server started with {@code -tls-cert}
 * (docs/OPERATIONS.md "TLS and mTLS"): the {@link SSLContext} (its trust decides which
 * server certificates are accepted; its key managers give the client certificate for mTLS),
 * the name checked against the server's certificate, and whether it is checked.
 *
 * @param context the SSL context
 * @param serverName the name the certificate must carry, or null for the address's host
 * @param verifyHostname whether the certificate's names are checked (keep true)
 */
public record TlsConfig(SSLContext context, String serverName, boolean verifyHostname) {
  /**
   * of uses an SSLContext as configured by the caller (for mTLS, one with key managers).
   *
   * @param context the context
   * @return the config
   */
  public static TlsConfig of(SSLContext context) {
    return new TlsConfig(context, null, true);
  }

  /**
   * trusting makes a context that trusts the CA certificates in a PEM file (for a server
   * whose certificate a private CA signed) and gives no client certificate.
   *
   * @param caPem the CA certificates, PEM
   * @return the config
   * @throws IOException when the file cannot be read
   * @throws GeneralSecurityException when it holds no certificate
   */
  public static TlsConfig trusting(Path caPem) throws IOException, GeneralSecurityException {
    KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
    ks.load(null, null);
    try (InputStream in = Files.newInputStream(caPem)) {
      int i = 0;
      for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
        ks.setCertificateEntry("ca" + i++, c);
      }
      if (i == 0) throw new GeneralSecurityException("no certificate in " + caPem);
    }
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(ks);
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(null, tmf.getTrustManagers(), null);
    return of(ctx);
  }

  /**
   * withServerName checks the certificate against name instead of the address's host.
   *
   * @param name the expected name
   * @return a new config
   */
  public TlsConfig withServerName(String name) {
    return new TlsConfig(context, name, verifyHostname);
  }
}
