package io.tickwheel.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Json is a small JSON reader for the test vectors: objects, arrays, strings, numbers, true/false/null. */
final class Json {
  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  /** parse reads one JSON value: Map, List, String, BigInteger (integral numbers), Double, Boolean or null. */
  static Object parse(String s) {
    Json j = new Json(s);
    Object v = j.value();
    j.ws();
    if (j.i != s.length()) throw new IllegalArgumentException("trailing JSON at " + j.i);
    return v;
  }

  private void ws() {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
  }

  private Object value() {
    ws();
    char c = s.charAt(i);
    switch (c) {
      case '{': {
        i++;
        Map<String, Object> m = new LinkedHashMap<>();
        ws();
        if (s.charAt(i) == '}') {
          i++;
          return m;
        }
        for (;;) {
          ws();
          String k = string();
          ws();
          expect(':');
          m.put(k, value());
          ws();
          if (s.charAt(i) == ',') {
            i++;
            continue;
          }
          expect('}');
          return m;
        }
      }
      case '[': {
        i++;
        List<Object> l = new ArrayList<>();
        ws();
        if (s.charAt(i) == ']') {
          i++;
          return l;
        }
        for (;;) {
          l.add(value());
          ws();
          if (s.charAt(i) == ',') {
            i++;
            continue;
          }
          expect(']');
          return l;
        }
      }
      case '"':
        return string();
      case 't':
        i += 4;
        return Boolean.TRUE;
      case 'f':
        i += 5;
        return Boolean.FALSE;
      case 'n':
        i += 4;
        return null;
      default:
        return number();
    }
  }

  private void expect(char c) {
    if (s.charAt(i) != c) throw new IllegalArgumentException("want " + c + " at " + i);
    i++;
  }

  private String string() {
    expect('"');
    StringBuilder b = new StringBuilder();
    for (;;) {
      char c = s.charAt(i++);
      if (c == '"') return b.toString();
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = s.charAt(i++);
      switch (e) {
        case 'n' -> b.append('\n');
        case 't' -> b.append('\t');
        case 'r' -> b.append('\r');
        case 'b' -> b.append('\b');
        case 'f' -> b.append('\f');
        case 'u' -> {
          b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
          i += 4;
        }
        default -> b.append(e);
      }
    }
  }

  private Object number() {
    int start = i;
    while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
    String n = s.substring(start, i);
    if (n.contains(".") || n.contains("e") || n.contains("E")) return Double.parseDouble(n);
    return new BigInteger(n);
  }
}
