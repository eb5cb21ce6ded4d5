package io.tickwheel.examples;

import io.tickwheel.client.AddOptions;
import io.tickwheel.client.ClientOptions;
import io.tickwheel.client.FastForwardResult;
import io.tickwheel.client.Missed;
import io.tickwheel.client.TickwheelClient;
import io.tickwheel.client.Timer;
import io.tickwheel.client.TlsConfig;
import java.nio.file.Path;
import java.util.List;

/** The README's shorter snippets, compiled (TourTest checks that the README shows these lines). */
final class More {
  private More() {}

  static long calls(TickwheelClient tw) {
    // A repeating timer: every 3 ticks, 4 times, with data; a cron timer in a zone.
    long due = tw.add(1, 11, 3, AddOptions.repeat(4).every(3).data("poison")).join();
    tw.addSchedule(1, 12, "0 4 * * *", "Europe/Paris", AddOptions.forever().missed(Missed.ONCE)).join();
    Timer t = tw.get(1, 11).join();                 // due, remaining, fired, paused, ...
    List<Timer> all = tw.listAll(1).join();         // pages through list for you
    tw.pause(1, 11).join(); tw.resume(1, 11).join();
    // Admin ops need the admin token (ClientOptions.token):
    FastForwardResult ff = tw.fastForward(8_640_000).join();  // a day at 10 ms ticks
    return due + t.due() + all.size() + ff.fired();
  }

  static ClientOptions tls() throws Exception {
    return new ClientOptions("timers.example:7420")
        .tls(TlsConfig.mutual(Path.of("ca.pem"), Path.of("client.pem"), Path.of("client.key")));
  }
}
