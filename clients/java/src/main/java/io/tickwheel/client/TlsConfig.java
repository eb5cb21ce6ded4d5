package io.tickwheel.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
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
    return pem(caPem, null, null);
  }

  /**
   * mutual makes a context for mTLS: it trusts the CA certificates in caPem and presents
   * the client certificate chain in certPem with its PKCS#8 key ("BEGIN PRIVATE KEY",
   * EC or RSA; the server's {@code tickwheel certs} makes such files).
   *
   * @param caPem the CA certificates, PEM
   * @param certPem the client's certificate chain, PEM
   * @param keyPem the client's private key, PKCS#8 PEM
   * @return the config
   * @throws IOException when a file cannot be read
   * @throws GeneralSecurityException when a file holds no usable certificate or key
   */
  public static TlsConfig mutual(Path caPem, Path certPem, Path keyPem) throws IOException, GeneralSecurityException {
    return pem(caPem, certPem, keyPem);
  }

  private static TlsConfig pem(Path caPem, Path certPem, Path keyPem) throws IOException, GeneralSecurityException {
    KeyManagerFactory kmf = null;
    if (certPem != null) {
      List<Certificate> chain = new ArrayList<>();
      try (InputStream in = Files.newInputStream(certPem)) {
        chain.addAll(CertificateFactory.getInstance("X.509").generateCertificates(in));
      }
      if (chain.isEmpty()) throw new GeneralSecurityException("no certificate in " + certPem);
      String text = Files.readString(keyPem);
      Matcher m = Pattern.compile("-----BEGIN PRIVATE KEY-----([^-]+)-----END PRIVATE KEY-----").matcher(text);
      if (!m.find()) throw new GeneralSecurityException(keyPem + ": want a PKCS#8 PEM key (BEGIN PRIVATE KEY)");
      PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(Base64.getMimeDecoder().decode(m.group(1)));
      String alg = chain.get(0).getPublicKey().getAlgorithm();
      PrivateKey key = KeyFactory.getInstance(alg).generatePrivate(spec);
      KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
      ks.load(null, null);
      char[] none = new char[0];
      ks.setKeyEntry("client", key, none, chain.toArray(new Certificate[0]));
      kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      kmf.init(ks, none);
    }
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
    ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
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
