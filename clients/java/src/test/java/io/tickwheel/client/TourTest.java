package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tickwheel.examples.Tour;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The README's tour (examples/.../Tour.java, the same text as the README's block) runs against the real server. */
class TourTest {
  @Test
  void theReadmeShowsTheTour() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    String tour = Files.readString(Path.of("examples/io/tickwheel/examples/Tour.java"));
    assertTrue(readme.contains("```java\n" + tour + "```\n"),
        "clients/java/README.md's tour block differs from examples/io/tickwheel/examples/Tour.java");
  }

  @Test
  void theReadmesOtherSnippetsAreCompiled() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    java.util.Set<String> compiled = new java.util.HashSet<>();
    for (String l : Files.readAllLines(Path.of("examples/io/tickwheel/examples/More.java"))) compiled.add(l.strip());
    String tour = Files.readString(Path.of("examples/io/tickwheel/examples/Tour.java"));
    int blocks = 0;
    for (String block : readme.split("```java\n")) {
      if (blocks++ == 0) continue; // the text before the first block
      String code = block.substring(0, block.indexOf("```"));
      if (tour.equals(code)) continue;
      for (String l : code.split("\n")) {
        if (!l.isBlank()) assertTrue(compiled.contains(l.strip()), "README line not in More.java: " + l);
      }
    }
    assertEquals(4, blocks, "java blocks in the README, plus one");
  }

  @Test
  void theTourRuns() throws Exception {
    try (TestServer srv = TestServer.start(); TickwheelClient admin = TickwheelClient.connect(srv.admin())) {
      List<String> log = new CopyOnWriteArrayList<>();
      CompletableFuture<Void> done = CompletableFuture.runAsync(() -> {
        try {
          Tour.run(srv.addr, TestServer.ADMIN_TOKEN, log::add);
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      });
      while (admin.listAll(7).join().size() < 2) Thread.sleep(10);
      // tw-time is frozen: move it 3.5 s on (10 ms ticks), a tick at a time in steps.
      for (int i = 0; i < 35 && !done.isDone(); i++) admin.fastForward(10).join();
      done.get(10, TimeUnit.SECONDS);
      assertEquals(List.of("cooldown already running", "regen 1/3", "cooldown over: {\"player\":42}", "regen 2/3",
          "regen 3/3 (last)"), log);
      assertEquals(0, admin.listAll(7).join().size());
    }
  }
}
