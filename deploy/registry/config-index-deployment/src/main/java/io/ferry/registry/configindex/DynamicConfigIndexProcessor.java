package io.ferry.registry.configindex;

import apicurio.common.app.components.config.index.DynamicPropertiesInfoRecorder;
import io.apicurio.common.apps.config.DynamicConfigPropertyDef;
import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import io.quarkus.arc.deployment.SyntheticBeanBuildItem;
import io.quarkus.deployment.annotations.BuildProducer;
import io.quarkus.deployment.annotations.BuildStep;
import io.quarkus.deployment.annotations.ExecutionTime;
import io.quarkus.deployment.annotations.Record;
import io.quarkus.deployment.builditem.CombinedIndexBuildItem;
import io.quarkus.runtime.RuntimeValue;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import javax.inject.Singleton;
import org.jboss.jandex.AnnotationInstance;
import org.jboss.jandex.AnnotationTarget;
import org.jboss.jandex.AnnotationValue;
import org.jboss.jandex.DotName;
import org.jboss.jandex.FieldInfo;
import org.jboss.jandex.Type;

/**
 * The one build step of the config-index extension, written for Ferry's local registry.
 *
 * <p>Apicurio marks the configuration properties an administrator may change at run time with
 * {@code @Dynamic} next to MicroProfile's {@code @ConfigProperty}. At build time this step reads
 * every such field from the application's index and hands their definitions (name, value type,
 * default, label, description, required properties) to the extension's recorder; the result is
 * published as the {@link DynamicConfigPropertyList} bean the application injects.
 */
public class DynamicConfigIndexProcessor {

    private static final DotName DYNAMIC = DotName.createSimple("io.apicurio.common.apps.config.Dynamic");
    private static final DotName CONFIG_PROPERTY =
            DotName.createSimple("org.eclipse.microprofile.config.inject.ConfigProperty");

    @BuildStep
    @Record(ExecutionTime.STATIC_INIT)
    void publishDynamicProperties(
            CombinedIndexBuildItem index,
            DynamicPropertiesInfoRecorder recorder,
            BuildProducer<SyntheticBeanBuildItem> beans) {
        List<DynamicConfigPropertyDef> definitions = new ArrayList<>();
        for (AnnotationInstance dynamic : index.getIndex().getAnnotations(DYNAMIC)) {
            if (dynamic.target().kind() != AnnotationTarget.Kind.FIELD) {
                continue;
            }
            FieldInfo field = dynamic.target().asField();
            AnnotationInstance property = field.annotation(CONFIG_PROPERTY);
            if (property == null || property.value("name") == null) {
                continue;
            }
            AnnotationValue defaultValue = property.value("defaultValue");
            DynamicConfigPropertyDef definition = new DynamicConfigPropertyDef(
                    property.value("name").asString(),
                    valueType(field.type()),
                    defaultValue == null ? null : defaultValue.asString());
            definition.setLabel(stringOf(dynamic, "label"));
            definition.setDescription(stringOf(dynamic, "description"));
            AnnotationValue requires = dynamic.value("requires");
            definition.setRequires(requires == null ? new String[0] : requires.asStringArray());
            definitions.add(definition);
        }
        // A stable order, so two builds of the same app record the same bytecode.
        definitions.sort(Comparator.comparing(DynamicConfigPropertyDef::getName));
        RuntimeValue<DynamicConfigPropertyList> list = recorder.initializePropertiesInfo(definitions);
        beans.produce(SyntheticBeanBuildItem.configure(DynamicConfigPropertyList.class)
                .scope(Singleton.class)
                .unremovable()
                .runtimeValue(list)
                .done());
    }

    /** The type a property holds: {@code Supplier<Boolean>} holds a Boolean; a plain field its own type. */
    private static Class<?> valueType(Type fieldType) {
        Type held = fieldType;
        if (fieldType.kind() == Type.Kind.PARAMETERIZED_TYPE
                && !fieldType.asParameterizedType().arguments().isEmpty()) {
            held = fieldType.asParameterizedType().arguments().get(0);
        }
        String name = held.name().toString();
        switch (name) {
            case "boolean": return Boolean.class;
            case "int": return Integer.class;
            case "long": return Long.class;
            default: break;
        }
        try {
            return Class.forName(name, false, Thread.currentThread().getContextClassLoader());
        } catch (ClassNotFoundException e) {
            return String.class;
        }
    }

    private static String stringOf(AnnotationInstance annotation, String member) {
        AnnotationValue value = annotation.value(member);
        return value == null ? "" : value.asString();
    }
}
