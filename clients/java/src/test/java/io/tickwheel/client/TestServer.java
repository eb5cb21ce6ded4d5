package io.tickwheel.client;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * TestServer runs the real tickwheel binary: $TICKWHEEL_BIN (CI builds it once), else one
 * built here with go build. On a free loopback port, in memory unless given a data dir,
 * frozen at tick 1000 unless the args say otherwise, with ADMIN_TOKEN as its admin token.
 */
final class TestServer implements AutoCloseable {
  static final String ADMIN_TOKEN = "java-test-admin-token";
  static final Path REPO = Path.of(System.getProperty("user.dir")).resolve("../..").normalize();
  private static Path built;

  final Process proc;
  final String addr;

  static synchronized Path binary() throws IOException, InterruptedException {
    String env = System.getenv("TICKWHEEL_BIN");
    if (env != null && !env.isEmpty()) return Path.of(env);
    if (built == null) {
      Path out = Path.of(System.getProperty("user.dir"), "target", "tickwheel");
      Process p = new ProcessBuilder("go", "build", "-o", out.toString(), "./cmd/tickwheel")
          .directory(REPO.toFile()).inheritIO().start();
      if (p.waitFor() != 0) throw new IOException("go build failed");
      built = out;
    }
    return built;
  }

  private TestServer(Process proc, String addr) {
    this.proc = proc;
    this.addr = addr;
  }

  /** start runs the server with the default frozen start and args. */
  static TestServer start(String... args) throws Exception {
    return startAt("127.0.0.1:0", "", List.of("-frozen", "-start-tick", "1000"), args);
  }

  /** startAt runs the server on addr with a data dir ("" in memory), base args then args. */
  static TestServer startAt(String addr, String dataDir, List<String> base, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(binary().toString(), "-addr", addr, "-data-dir", dataDir,
        "-log-level", "warn", "-http-addr", "off"));
    cmd.addAll(base);
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().put("TICKWHEEL_ADMIN_TOKEN", ADMIN_TOKEN);
    Process p = pb.start();
    CompletableFuture<String> found = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      Pattern re = Pattern.compile("tickwheel listening on (\\S+)");
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        StringBuilder all = new StringBuilder();
        while ((line = r.readLine()) != null) {
          all.append(line).append('\n');
          Matcher m = re.matcher(line);
          if (m.find()) found.complete(m.group(1));
        }
        found.completeExceptionally(new IOException("tickwheel exited before listening: " + all));
      } catch (IOException e) {
        found.completeExceptionally(e);
      }
    }, "tickwheel-stdout");
    t.setDaemon(true);
    t.start();
    try {
      return new TestServer(p, found.get(20, TimeUnit.SECONDS));
    } catch (Exception e) {
      p.destroyForcibly();
      throw e;
    }
  }

  ClientOptions admin() {
    return new ClientOptions(addr).token(ADMIN_TOKEN).name("java-test");
  }

  ClientOptions plain() {
    return new ClientOptions(addr).name("java-test");
  }

  /** kill ends the server with SIGKILL (kill -9) and waits. */
  void kill() throws InterruptedException {
    proc.destroyForcibly();
    proc.waitFor(10, TimeUnit.SECONDS);
  }

  /** close ends the server with SIGTERM (graceful) and waits. */
  @Override
  public void close() throws InterruptedException {
    if (!proc.isAlive()) return;
    proc.destroy();
    if (!proc.waitFor(10, TimeUnit.SECONDS)) kill();
  }

  static Path tempDir(String prefix) throws IOException {
    Path d = Files.createTempDirectory(prefix);
    d.toFile().deleteOnExit();
    return d;
  }

  static void rmrf(Path d) {
    File[] fs = d.toFile().listFiles();
    if (fs != null) for (File f : fs) {
      if (f.isDirectory()) rmrf(f.toPath());
      f.delete();
    }
    d.toFile().delete();
  }
}
