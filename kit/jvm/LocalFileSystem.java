package flinkkit;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}, checksums and all), whose permissions are set
 * through {@code java.nio}, not by a {@code chmod} process: without Hadoop's native library
 * (which PySpark does not ship) {@code RawLocalFileSystem.setPermission} starts one for every
 * file it creates and every directory it makes, a few milliseconds each from a large JVM. A
 * live micro-batch made 40-75 (its checkpoint, its state store's files, its output), ~0.1 s.
 * Local sessions the kit starts use it ({@code spark.hadoop.fs.file.impl}, {@code kit.spark}).
 *
 * <pre>
 *   mkdirs(d, 0750) under umask 022  ->  drwxr-x---   (as chmod 0750 would leave it)
 *   a sticky bit (01777)             ->  chmod, as Hadoop runs it (java.nio cannot set it)
 * </pre>
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
    public LocalFileSystem() {
        super(new Raw());
    }

    /** The raw file system under the checksums: Hadoop's, but for {@link #setPermission}. */
    public static class Raw extends RawLocalFileSystem {
        // permission bits from the lowest (others' execute) up
        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ};

        public void setPermission(Path p, FsPermission permission) throws IOException {
            int mode = permission.toShort();
            if ((mode & ~0777) != 0) {   // the sticky bit: Hadoop's way
                super.setPermission(p, permission);
                return;
            }
            EnumSet set = EnumSet.noneOf(PosixFilePermission.class);
            for (int i = 0; i < BITS.length; i++) {
                if ((mode & (1 << i)) != 0) set.add(BITS[i]);
            }
            try {
                Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
            } catch (UnsupportedOperationException e) {   // a file system without POSIX permissions
                super.setPermission(p, permission);
            }
        }
    }
}
