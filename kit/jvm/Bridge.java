package flinkkit;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.StringReader;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.connect.service.SparkListenerConnectSessionClosed;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkproject.connect.protobuf.Any;
import py4j.Gateway;
import py4j.commands.Command;

/**
 * A Spark Connect relation plugin that lets a Connect client reach its session's JVM objects
 * with py4j, the protocol PySpark's classic client speaks: a Connect server started with
 * {@code spark.connect.extensions.relation.classes=flinkkit.Bridge} (kit/cluster.py does)
 * answers three relation extensions, each an {@code Any} of type
 * {@code type.googleapis.com/flinkkit.<kind>}:
 *
 * <pre>
 *   kind    value                               the relation it gives
 *   Py4J    py4j commands (UTF-8)               no rows, one column named the last command's answer
 *   Frame   a Relation (a Connect DataFrame)    no rows, one column named the py4j id of its Dataset
 *   Plan    the py4j id of a Dataset            that Dataset's plan (a Connect DataFrame of it)
 * </pre>
 *
 * Each Connect session has a py4j {@code Gateway} of its own (its entry point, py4j's
 * {@code t}, the session's classic SparkSession), dropped when the session closes. The
 * commands run through py4j's own command classes, as its socket server runs them, so
 * kit/bridge.py is a py4j client whose connection sends each command as a Connect relation.
 * A relation of any other type is not the kit's: the plugin leaves it to the others.
 *
 * <p>Every client of a server with this plugin can call any Java method in its driver: load it
 * only where the server's users may do that.
 */
public final class Bridge implements RelationPlugin {
    private static final String TYPE = "type.googleapis.com/flinkkit.";
    private static final String[] COMMANDS = {"Array", "Call", "Constructor", "Dir", "Exception", "Field",
                                              "HelpPage", "JVMView", "List", "Memory", "Reflection"};
    private static final Map SESSIONS = new HashMap();   // Connect session id -> Session
    private static SparkListener closing = null;

    /** One Connect session's py4j gateway and the commands that run on it. */
    static final class Session {
        final Gateway gateway;
        final Map commands = new HashMap();   // py4j command name -> Command

        Session(SparkSession session) throws Exception {
            gateway = new Gateway(session);
            gateway.startup();
            for (int i = 0; i < COMMANDS.length; i++) {
                Command command = (Command) Class.forName("py4j.commands." + COMMANDS[i] + "Command")
                    .getConstructor(new Class[0]).newInstance(new Object[0]);
                command.init(gateway, null);
                commands.put(command.getCommandName(), command);
            }
        }

        /** Run {@code text}'s commands in turn; the last one's answer, its newline dropped. */
        String run(String text) throws Exception {
            BufferedReader in = new BufferedReader(new StringReader(text));
            StringWriter answers = new StringWriter();
            BufferedWriter out = new BufferedWriter(answers);
            String answer = "";
            for (String name = in.readLine(); name != null; name = in.readLine()) {
                Command command = (Command) commands.get(name);
                if (command == null) {
                    throw new IllegalArgumentException("flinkkit.Bridge runs no py4j command '" + name + "'");
                }
                answers.getBuffer().setLength(0);
                command.execute(name, in, out);
                out.flush();
                answer = answers.toString();
            }
            return answer.endsWith("\n") ? answer.substring(0, answer.length() - 1) : answer;
        }
    }

    /** Forgets a Connect session's gateway (and the objects it holds) when the session closes. */
    static final class Closing extends SparkListener {
        public void onOtherEvent(SparkListenerEvent event) {
            if (event instanceof SparkListenerConnectSessionClosed) {
                synchronized (SESSIONS) {
                    SESSIONS.remove(((SparkListenerConnectSessionClosed) event).sessionId());
                }
            }
        }
    }

    private static Session session(SparkConnectPlanner planner) throws Exception {
        synchronized (SESSIONS) {
            if (closing == null) {
                closing = new Closing();
                planner.session().sparkContext().addSparkListener(closing);
            }
            Session found = (Session) SESSIONS.get(planner.sessionId());
            if (found == null) {
                found = new Session(planner.session());
                SESSIONS.put(planner.sessionId(), found);
            }
            return found;
        }
    }

    public Optional transform(byte[] relation, SparkConnectPlanner planner) {
        try {
            Any any = Any.parseFrom(relation);
            if (!any.getTypeUrl().startsWith(TYPE)) {
                return Optional.empty();
            }
            String kind = any.getTypeUrl().substring(TYPE.length());
            byte[] value = any.getValue().toByteArray();
            Session session = session(planner);
            String answer = null;
            if (kind.equals("Py4J")) {
                answer = session.run(new String(value, StandardCharsets.UTF_8));
            } else if (kind.equals("Frame")) {
                LogicalPlan plan = planner.transformRelation(Relation.parseFrom(value));
                answer = session.gateway.putNewObject(Dataset.ofRows(planner.session(), plan));
            } else if (kind.equals("Plan")) {
                Object found = session.gateway.getObject(new String(value, StandardCharsets.UTF_8));
                if (!(found instanceof Dataset)) {
                    throw new IllegalArgumentException("flinkkit.Bridge has no Dataset " + new String(value, StandardCharsets.UTF_8));
                }
                return Optional.of(((Dataset) found).logicalPlan());
            } else {
                throw new IllegalArgumentException("flinkkit.Bridge answers no " + kind);
            }
            StructType named = new StructType().add(answer, DataTypes.StringType);   // read by its schema alone
            return Optional.of(planner.session().createDataFrame(Collections.emptyList(), named).logicalPlan());
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
